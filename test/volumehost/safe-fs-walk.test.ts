// The safe-fs tests again with openat2 turned off (PODVOL_SAFE_FS=walk), as on
// a kernel before 5.6 or without the native/openat2 addon: every path is then
// walked one component at a time, and must give the same guarantees.
process.env.PODVOL_SAFE_FS = 'walk';
await import('./safe-fs.test.ts');
