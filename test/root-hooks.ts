// Mocha root hooks (registered in .mocharc.json): the golden-data tally of test/golden-required.ts,
// printed once at the end of the run.

import { goldenSummary, recordGoldenTest } from './golden-required';

export const mochaHooks = {
  afterEach(this: Mocha.Context): void {
    recordGoldenTest(this.currentTest);
  },
  afterAll(): void {
    console.log(`\n  ${goldenSummary()}`);
  },
};
