import * as Lab from '@hapi/lab';
import { startTestServer } from '../helpers/server';
export const lab = Lab.script();
lab.it('dump', async () => {
    const t = await startTestServer('sqlite');
    try {
        for (const r of t.server.table()) {
            console.log(r.method, r.path, JSON.stringify(r.settings.auth));
        }
        console.log(JSON.stringify(Object.keys(r0(t))));
    } finally { await t.stop(); }
});
const r0 = (t: any) => t.server.table()[0];
