// configMap's validation: the object name, defaultMode and items.
import { type Add, checkKeyToPaths, checkObjectName, modeError, type Obj } from './util/field-errors.ts';

export function validateConfigMapSource(src: Obj, field: string, add: Add): void {
  checkObjectName(src, 'name', field, add);
  const me = modeError(src.defaultMode, `${field}.defaultMode`);
  if (me) add('InvalidMode', me);
  checkKeyToPaths(src.items, `${field}.items`, add);
}
