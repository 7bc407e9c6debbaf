// String formats as grammars over the decoded characters (the caller JSON-encodes them). Each
// follows what ajv-formats ("full" mode) accepts, so generated values pass the final check:
// date and date-time know month lengths and leap years; time requires a time zone like
// ajv-formats v3. Of the leap seconds ajv-formats accepts (any hh:mm:60 that is 23:59:60 in
// UTC) only those written in UTC are included: the others need a grammar branch per local
// time and offset (tens of thousands of positions) for a value no one generates on purpose.

import { fullFormats } from 'ajv-formats/dist/formats';
import { ConstraintError } from './constraint-error';
import { Expr } from './grammar-ir';
import { alt, chars, seq } from './grammar-ir';
import { regexBranches } from './regex-to-expr';

const DATE = String.raw`(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[048]|[2468][048]|[13579][26])00)-02-29)`;
// ajv-formats reads the seconds with `+"59.…"`, a double: a fraction from 0.999999999999996447… (60 − 2⁻⁴⁸, the
// midpoint below 60, which rounds to 60) on makes 59.… equal 60, which fails `sec < 60` and passes only as a leap
// second (23:59 in UTC), and 60.… equal 61, which fails `sec < 61`. So seconds 59 and 60 take only fractions below
// that midpoint, and 23:59:59 written in UTC takes the rest (FRACTION_BELOW_MIDPOINT / FRACTION_FROM_MIDPOINT).
const MIDPOINT_DIGITS = '999999999999996447286321199499070644378662109375';
/** Fraction digits d with 0.d below the midpoint (one alternative per digit position, nested). */
const FRACTION_BELOW_MIDPOINT = [...MIDPOINT_DIGITS].reduceRight((rest, d, i) => {
  const lower = d === '0' ? '' : `[0-${+d - 1}][0-9]*`;
  const same = i === MIDPOINT_DIGITS.length - 1 ? '' : `${d}(?:${rest})?`;
  return [lower, same].filter(Boolean).join('|');
}, '');
/** Fraction digits d with 0.d at or above the midpoint. */
const FRACTION_FROM_MIDPOINT = [...MIDPOINT_DIGITS].reduceRight((rest, d) => {
  const higher = d === '9' ? '' : `[${+d + 1}-9][0-9]*`;
  return [higher, `${d}(?:${rest})`].filter(Boolean).join('|');
}, '[0-9]*');
const SECONDS = String.raw`(?:(?:[0-5][0-8]|[0-4]9)(?:\.[0-9]+)?|59(?:\.(?:${FRACTION_BELOW_MIDPOINT}))?)`;
const TIME = String.raw`(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:${SECONDS}(?:[zZ]|[+-](?:[01][0-9]|2[0-3])(?::?[0-5][0-9])?))`;
const HEX = '[0-9a-fA-F]';
// RFC 3986 absolute URI, case-insensitive like ajv-formats.
const PCT = '%[0-9a-fA-F]{2}';
const PCHAR = `(?:[a-zA-Z0-9\\-._~!$&'()*+,;=:@]|${PCT})`;
const H16 = '[0-9a-fA-F]{1,4}';
const DEC_OCTET = '(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)';
const LS32 = `(?:${H16}:${H16}|(?:${DEC_OCTET}\\.){3}${DEC_OCTET})`;
// IPv6address per RFC 3986 section 3.2.2: one branch per position of the "::".
const IPV6 =
  `(?:(?:${H16}:){6}${LS32}|::(?:${H16}:){5}${LS32}|(?:${H16})?::(?:${H16}:){4}${LS32}` +
  `|(?:(?:${H16}:){0,1}${H16})?::(?:${H16}:){3}${LS32}|(?:(?:${H16}:){0,2}${H16})?::(?:${H16}:){2}${LS32}` +
  `|(?:(?:${H16}:){0,3}${H16})?::${H16}:${LS32}|(?:(?:${H16}:){0,4}${H16})?::${LS32}` +
  `|(?:(?:${H16}:){0,5}${H16})?::${H16}|(?:(?:${H16}:){0,6}${H16})?::)`;
const IP_LITERAL = `\\[(?:${IPV6}|[Vv][0-9a-fA-F]+\\.[a-zA-Z0-9\\-._~!$&'()*+,;=:]+)\\]`;
const REG_NAME = `(?:[a-zA-Z0-9\\-._~!$&'()*+,;=]|${PCT})*`;
const URI =
  `[a-zA-Z][a-zA-Z0-9+\\-.]*:` +
  `(?://(?:(?:[a-zA-Z0-9\\-._~!$&'()*+,;=:]|${PCT})*@)?(?:${IP_LITERAL}|${REG_NAME})(?::[0-9]*)?(?:/${PCHAR}*)*` +
  `|/(?:${PCHAR}+(?:/${PCHAR}*)*)?|${PCHAR}+(?:/${PCHAR}*)*)` +
  `(?:\\?(?:${PCHAR}|[/?])*)?(?:#(?:${PCHAR}|[/?])*)?`;
// The ajv-formats full email pattern, written out here.
const EMAIL =
  "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?\\.)+[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?";

const FORMAT_REGEX: Record<string, string> = {
  date: DATE,
  email: EMAIL,
  uuid: `(?:urn:uuid:)?${HEX}{8}-(?:${HEX}{4}-){3}${HEX}{12}`,
  uri: URI,
  // ajv-formats' "byte": base64 with padding.
  byte: '(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?',
  ipv4: String.raw`(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`,
};

export const SUPPORTED_FORMATS = ['date', 'time', 'date-time', ...Object.keys(FORMAT_REGEX).filter((f) => f !== 'date')];

function regexExpr(source: string, name: string): Expr {
  return alt(...regexBranches(source, '', `format '${name}'`).map((b) => b.expr));
}

const LEAP_SECOND_UTC = String.raw`23:59:(?:60(?:\.(?:${FRACTION_BELOW_MIDPOINT}))?|59\.(?:${FRACTION_FROM_MIDPOINT}))(?:[zZ]|[+-]00(?::?00)?)`;

function timeExpr(): Expr {
  return alt(regexExpr(TIME, 'time'), regexExpr(LEAP_SECOND_UTC, 'time'));
}

/** ajv-formats' formats that check numbers, or accept any string. */
const NOT_STRING_CHECKS = new Set(['int32', 'int64', 'float', 'double', 'password', 'binary']);

/**
 * Whether ajv (with ajv-formats) checks strings against this format. Formats it does not know
 * are annotations it ignores, and so does the grammar.
 */
export function checksStrings(format: unknown): boolean {
  return typeof format === 'string' && Object.hasOwn(fullFormats, format) && !NOT_STRING_CHECKS.has(format);
}

/** The decoded characters a format allows, as a grammar expression; throws for unknown formats. */
export function formatExpr(format: string, place: string): Expr {
  if (format === 'time') return timeExpr();
  if (format === 'date-time') return seq(regexExpr(DATE, 'date-time'), chars([0x20, 0x20, 0x54, 0x54, 0x74, 0x74]), timeExpr());
  const source = FORMAT_REGEX[format];
  if (source === undefined)
    throw new ConstraintError(`format '${format}' is not supported (supported: ${SUPPORTED_FORMATS.join(', ')})`, place);
  return regexExpr(source, format);
}
