import { spawnSync } from 'node:child_process';
import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { projectRoot as ROOT } from '../../lib/package-info';

export interface SoftHsmToken {
    library: string;
    label: string;
    pin: string;
    /** Restores SOFTHSM2_CONF and removes the token folder; close every provider on the token first. */
    remove(): void;
}


/**
 * A fresh SoftHSM2 token in a temp folder (scripts/ensure-softhsm.sh installs SoftHSM2 from Debian when missing).
 * SoftHSM reads SOFTHSM2_CONF at C_Initialize, i.e. when the first provider of the process opens the library, so
 * the variable is set here, in the test process, and never by the provider.
 */
export const createSoftHsmToken = (): SoftHsmToken => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-softhsm-'));
    const tokens = Path.join(dir, 'tokens');
    const ensured = spawnSync('bash', [Path.join(ROOT, 'scripts/ensure-softhsm.sh'), tokens], { encoding: 'utf8' });
    if (ensured.status !== 0) {
        throw new Error(`scripts/ensure-softhsm.sh failed (exit ${ensured.status ?? ensured.signal}):\n${ensured.stderr}${ensured.stdout}`);
    }
    const library = ensured.stdout.trim().split('\n').pop()!;
    const conf = Path.join(dir, 'softhsm2.conf');
    Fs.writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`);
    const previous = process.env.SOFTHSM2_CONF;
    process.env.SOFTHSM2_CONF = conf;
    const label = `hallmark-${Crypto.randomBytes(4).toString('hex')}`;
    const pin = Crypto.randomBytes(8).toString('hex');
    const init = spawnSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--pin', pin, '--so-pin', Crypto.randomBytes(8).toString('hex')], {
        encoding: 'utf8',
        env: { ...process.env, SOFTHSM2_CONF: conf }
    });
    if (init.status !== 0) {
        throw new Error(`softhsm2-util --init-token failed (exit ${init.status ?? init.signal}):\n${init.stderr}`);
    }
    return {
        library,
        label,
        pin,
        remove() {
            if (previous === undefined) {
                delete process.env.SOFTHSM2_CONF;
            }
            else {
                process.env.SOFTHSM2_CONF = previous;
            }
            Fs.rmSync(dir, { recursive: true, force: true });
        }
    };
};
