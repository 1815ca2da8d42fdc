// How Easel was started decides `--help`'s usage line and where data goes without --data-dir: ./data from a
// checkout (`npm start`), $XDG_DATA_HOME/easel for the installed `easel` command.
import { describe, expect, it } from 'vitest';
import { CHECKOUT_INVOCATION, formatHelp, installedDataDir, installedInvocation, parseConfig } from '../../../server/config/index.ts';

function dataDirOf(result: ReturnType<typeof parseConfig>): string {
  if (!result.ok || result.value === null) throw new Error(`expected a config, got ${JSON.stringify(result)}`);
  return result.value.dataDir;
}

describe('the data folder by the way Easel runs', () => {
  it('is ./data from a checkout, with or without the invocation given', () => {
    expect(dataDirOf(parseConfig([], {}))).toBe('data');
    expect(dataDirOf(parseConfig([], {}, CHECKOUT_INVOCATION))).toBe('data');
    // A checkout ignores XDG_DATA_HOME: its data stays beside it, as always.
    expect(dataDirOf(parseConfig([], { XDG_DATA_HOME: '/xdg' }, CHECKOUT_INVOCATION))).toBe('data');
  });

  it('is $XDG_DATA_HOME/easel for the installed command, else ~/.local/share/easel', () => {
    expect(dataDirOf(parseConfig([], { XDG_DATA_HOME: '/xdg/data' }, installedInvocation({ XDG_DATA_HOME: '/xdg/data' }, '/home/ann')))).toBe('/xdg/data/easel');
    expect(dataDirOf(parseConfig([], {}, installedInvocation({}, '/home/ann')))).toBe('/home/ann/.local/share/easel');
  });

  it('follows the XDG rules: an unset, empty or relative XDG_DATA_HOME is ignored; trailing slashes are not doubled', () => {
    expect(installedDataDir({}, '/home/ann')).toBe('/home/ann/.local/share/easel');
    expect(installedDataDir({ XDG_DATA_HOME: '' }, '/home/ann')).toBe('/home/ann/.local/share/easel');
    expect(installedDataDir({ XDG_DATA_HOME: 'relative/share' }, '/home/ann')).toBe('/home/ann/.local/share/easel');
    expect(installedDataDir({ XDG_DATA_HOME: './share' }, '/home/ann')).toBe('/home/ann/.local/share/easel');
    expect(installedDataDir({ XDG_DATA_HOME: '~/share' }, '/home/ann')).toBe('/home/ann/.local/share/easel');
    expect(installedDataDir({ XDG_DATA_HOME: '/srv/share/' }, '/home/ann')).toBe('/srv/share/easel');
    expect(installedDataDir({}, '/home/ann/')).toBe('/home/ann/.local/share/easel');
  });

  it('--data-dir and $EASEL_DATA_DIR win over either default', () => {
    const installed = installedInvocation({ XDG_DATA_HOME: '/xdg' }, '/home/ann');
    for (const invocation of [CHECKOUT_INVOCATION, installed]) {
      expect(dataDirOf(parseConfig(['--data-dir', '/mine'], {}, invocation))).toBe('/mine');
      expect(dataDirOf(parseConfig([], { EASEL_DATA_DIR: '/from-env' }, invocation))).toBe('/from-env');
      expect(dataDirOf(parseConfig(['--data-dir=/flag'], { EASEL_DATA_DIR: '/from-env' }, invocation))).toBe('/flag');
    }
  });
});

describe('--help by the way Easel runs', () => {
  const flat = (help: string) => help.replace(/\s+/g, ' ');

  it('from a checkout: `npm start -- [flags]` and ./data', () => {
    for (const help of [formatHelp(), formatHelp(80, CHECKOUT_INVOCATION)]) {
      expect(help.split('\n')[0]).toBe('Usage: npm start -- [flags]');
      expect(flat(help)).toContain('--data-dir DIR where conversations and images are kept (default ./data) [$EASEL_DATA_DIR]');
    }
  });

  it('as the installed command: `easel [flags]` and the XDG folder it will use', () => {
    const help = formatHelp(80, installedInvocation({ XDG_DATA_HOME: '/xdg/data' }, '/home/ann'));
    expect(help.split('\n')[0]).toBe('Usage: easel [flags]');
    expect(flat(help)).toContain('--data-dir DIR where conversations and images are kept (default /xdg/data/easel) [$EASEL_DATA_DIR]');
    expect(flat(formatHelp(80, installedInvocation({}, '/home/ann')))).toContain('(default /home/ann/.local/share/easel)');
    expect(help).not.toContain('npm start');
  });

  it('a --data-dir without its value names the right default', () => {
    const result = parseConfig(['--data-dir'], {}, installedInvocation({}, '/home/ann'));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.message).toBe('--data-dir needs a value: where conversations and images are kept (default /home/ann/.local/share/easel).');
  });
});
