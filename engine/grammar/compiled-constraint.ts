// A grammar or schema compiled against a vocabulary: the byte-level automaton, its cached token
// masks, and the final output check. Everything here is shared by all requests with the same
// constraint; a matcher per request only holds a state number.

import { ConstraintError } from './constraint-error';
import { GrammarTables } from './flat-grammar';
import { ConstraintMatcher, GrammarMatcher } from './grammar-matcher';
import { ShortestCompletion } from './shortest-completion';
import { DEAD, StackAutomaton } from './stack-automaton';
import { TokenMasks } from './token-masks';
import { TokenTrie } from './token-trie';

export interface CompiledConstraint {
  newMatcher(): ConstraintMatcher;
  /**
   * The final check of a finished output: for a schema, the parsed JSON after ajv validation;
   * for a grammar, the text after checking the grammar accepts it. Throws ConstraintError.
   */
  validateOutput(text: string): unknown;
  /** Automaton states built so far (grows as requests explore the grammar). */
  readonly stateCount: number;
}

export type OutputCheck = (text: string) => unknown;

export class CompiledGrammarConstraint implements CompiledConstraint {
  private masks: TokenMasks;
  private forced = new Map<number, number>();
  private completion?: ShortestCompletion;
  private check: OutputCheck;

  readonly automaton: StackAutomaton;

  /** From the tables compile-pipeline.ts made (in a worker or in this thread). */
  constructor(tables: GrammarTables, trie: TokenTrie, check?: OutputCheck) {
    this.automaton = new StackAutomaton(tables);
    this.masks = new TokenMasks(this.automaton, trie);
    this.check = check ?? ((text) => this.checkGrammar(text));
  }

  get stateCount(): number {
    return this.automaton.stateCount;
  }

  newMatcher(): ConstraintMatcher {
    return new GrammarMatcher(
      this.masks,
      () => (this.completion ??= new ShortestCompletion(this.automaton.g, this.automaton)),
      this.forced,
    );
  }

  validateOutput(text: string): unknown {
    return this.check(text);
  }

  private checkGrammar(text: string): string {
    const bytes = new TextEncoder().encode(text);
    let s = this.automaton.initial;
    for (let i = 0; i < bytes.length; i++) {
      s = this.automaton.next(s, bytes[i]);
      if (s === DEAD) throw new ConstraintError('output does not match the grammar', `byte ${i}`);
    }
    if (!this.automaton.accepting(s)) throw new ConstraintError('output ends before the grammar is complete', `byte ${bytes.length}`);
    return text;
  }
}
