// Types of build-bundle.mjs (plain JavaScript, see there) for scripts/build-binary.ts.
import type { BuildOptions, Plugin } from 'esbuild';

export const repo: string;
export const bundleDir: string;
export const moduleDirPlugin: Plugin;
export const commonOptions: BuildOptions;
export function buildBundle(outdir?: string): Promise<void>;
