// The forward passes the CPU backend's compute thread can run, by the name a version's planner gives
// (CpuModelPlan.pass): one per folder, as versions.ts lists the versions. RWKV-5.2 runs on RWKV-6's pass.

import { Rwkv7CpuForward } from '../rwkv7/cpu-forward';
import { FinchCpuForward } from '../rwkv6/cpu-forward';
import { Rwkv4CpuForward } from '../rwkv4/cpu-forward';

export const CPU_PASSES = {
  rwkv7: Rwkv7CpuForward,
  rwkv6: FinchCpuForward,
  rwkv4: Rwkv4CpuForward,
} as const;

export type CpuPassName = keyof typeof CPU_PASSES;
