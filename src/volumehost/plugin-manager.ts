// kubelet's VolumePluginMgr: holds the plugins and finds the one for a spec.
import type { VolumeHost } from './types.ts';
import { type Spec, VolumeError, type VolumePlugin } from './volume.ts';

const qualifiedName =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

export class VolumePluginMgr {
  readonly #plugins = new Map<string, VolumePlugin>();

  /** Registers and initialises plugins; a bad or duplicate name fails the whole set, as in kubelet. */
  initPlugins(plugins: VolumePlugin[], host: VolumeHost): void {
    const errors: string[] = [];
    for (const plugin of plugins) {
      if (!qualifiedName.test(plugin.name)) {
        errors.push(`volume plugin has invalid name: "${plugin.name}"`);
        continue;
      }
      if (this.#plugins.has(plugin.name)) {
        errors.push(`volume plugin "${plugin.name}" was registered more than once`);
        continue;
      }
      plugin.init(host);
      this.#plugins.set(plugin.name, plugin);
    }
    if (errors.length > 0) throw new Error(errors.join('; '));
  }

  names(): string[] {
    return [...this.#plugins.keys()];
  }

  findPluginBySpec(spec: Spec): VolumePlugin {
    const matches = [...this.#plugins.values()].filter((p) => p.canSupport(spec));
    const [match] = matches;
    if (match === undefined) throw new VolumeError('UnknownVolumeSource', 'no volume plugin matched');
    if (matches.length > 1) {
      throw new VolumeError(
        'UnknownVolumeSource',
        `multiple volume plugins matched: ${matches.map((p) => p.name).join(',')}`,
      );
    }
    return match;
  }

  findPluginByName(name: string): VolumePlugin {
    const plugin = this.#plugins.get(name);
    if (!plugin) throw new VolumeError('UnknownPlugin', `no volume plugin matched name: ${name}`);
    return plugin;
  }
}
