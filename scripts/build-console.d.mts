// Types of scripts/build-console.mjs for the tests that import it.
export declare const FIRST_PAGE_BUDGET: number;
export declare function firstPageBytes(outDir: string): { file: string; raw: number; gzip: number }[];
export declare function buildConsole(opts: { root: string; force?: boolean }): Promise<void>;
