import Fs from 'node:fs';
import Path from 'node:path';

/** Whether `dir` holds Hallmark's own package.json (not a fixture's or a dependent project's). */
const isHallmarkRoot = (dir: string): boolean => {
    try {
        return (JSON.parse(Fs.readFileSync(Path.join(dir, 'package.json'), 'utf8')) as { name?: string }).name === 'hallmark';
    }
    catch {
        return false;
    }
};

/**
 * The project root, found from here whether running from sources or from the compiled dist/ tree, also where the
 * sources are not shipped (the container image has package.json and dist/ only).
 */
export const projectRoot = ((): string => {
    for (let dir = __dirname; ; dir = Path.dirname(dir)) {
        if (isHallmarkRoot(dir)) {
            return dir;
        }
        if (Path.dirname(dir) === dir) {
            throw new Error('Cannot find the Hallmark project root');
        }
    }
})();

export const packageVersion = (): string =>
    (JSON.parse(Fs.readFileSync(Path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
