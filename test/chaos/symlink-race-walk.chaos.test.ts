// The symlink race again with podvol's safe-fs walking every path one
// component at a time (PODVOL_SAFE_FS=walk, inherited by the podvol the test
// starts), as on a kernel before 5.6 or without the native/openat2 addon: the
// fallback must hold against the same swapping container.
process.env.PODVOL_SAFE_FS = 'walk';
await import('./symlink-race.chaos.test.ts');
