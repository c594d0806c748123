// podvol's version, from package.json. A JSON import (not a file read
// relative to import.meta.url) so the bundled single executable carries it.
import pkg from '../package.json' with { type: 'json' };

export const version: string = pkg.version;
