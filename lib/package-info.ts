import Fs from 'node:fs';
import Path from 'node:path';

/** The project root, found from here whether running from sources or from the compiled dist/ tree. */
export const projectRoot = ((): string => {
    for (let dir = __dirname; ; dir = Path.dirname(dir)) {
        if (Fs.existsSync(Path.join(dir, 'package.json')) && Fs.existsSync(Path.join(dir, 'plugins'))) {
            return dir;
        }
        if (Path.dirname(dir) === dir) {
            throw new Error('Cannot find the Hallmark project root');
        }
    }
})();

export const packageVersion = (): string =>
    (JSON.parse(Fs.readFileSync(Path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
