import type Hapi from '@hapi/hapi';
import { ROOT_CLIENT } from './server';

/** Small helpers for tests of the management API: tokens, tenants and clients through the public routes. */

export const bearer = (token: string): { authorization: string } => ({ authorization: `Bearer ${token}` });

/** A token of the client credentials grant; throws with the answer when the token endpoint refuses. */
export const tokenFor = async (server: Hapi.Server, clientId: string, secret: string): Promise<string> => {
    const res = await server.inject({
        method: 'POST',
        url: '/api/oauth2/token',
        payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: secret }
    });
    if (res.statusCode !== 200) {
        throw new Error(`No token for ${clientId}: ${res.statusCode} ${res.payload}`);
    }
    return (res.result as { access_token: string }).access_token;
};

export const rootToken = (server: Hapi.Server): Promise<string> => tokenFor(server, ROOT_CLIENT.id, ROOT_CLIENT.secret);

/** The claims of a JWT, unverified (the service verified it; tests only read it). */
export const jwtClaims = (token: string): Record<string, unknown> =>
    JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));

export const createTenant = async (server: Hapi.Server, rootToken: string, id: string, extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> => {
    const res = await server.inject({ method: 'POST', url: '/api/tenants', headers: bearer(rootToken), payload: { id, name: `Tenant ${id}`, ...extra } });
    if (res.statusCode !== 201) {
        throw new Error(`Tenant ${id} not created: ${res.statusCode} ${res.payload}`);
    }
    return res.result as Record<string, unknown>;
};

export interface CreatedClient {
    clientId: string;
    clientSecret: string;
}

export const createClient = async (server: Hapi.Server, token: string, body: Record<string, unknown>): Promise<CreatedClient> => {
    const res = await server.inject({ method: 'POST', url: '/api/clients', headers: bearer(token), payload: body });
    if (res.statusCode !== 201) {
        throw new Error(`Client ${String(body.clientId)} not created: ${res.statusCode} ${res.payload}`);
    }
    const { clientId, clientSecret } = res.result as CreatedClient;
    return { clientId, clientSecret };
};

/** A client and a token for it, in one step. */
export const clientWithToken = async (server: Hapi.Server, token: string, body: Record<string, unknown>): Promise<CreatedClient & { token: string }> => {
    const client = await createClient(server, token, body);
    return { ...client, token: await tokenFor(server, client.clientId, client.clientSecret) };
};

/**
 * Every table with a tenant_id column, from the database catalog, so tables added later are covered without
 * touching the tests.
 */
export const tenantTables = async (server: Hapi.Server): Promise<string[]> => {
    const { db } = server;
    const result = db.dialect === 'sqlite'
        ? await db.knex.raw(`select m.name as t from sqlite_master m, pragma_table_info(m.name) p
            where m.type = 'table' and p.name = 'tenant_id' order by m.name`)
        : await db.knex.raw(`select c.table_name as t from information_schema.columns c
            join information_schema.tables s on s.table_schema = c.table_schema and s.table_name = c.table_name
            where c.column_name = 'tenant_id' and c.table_schema = current_schema() and s.table_type = 'BASE TABLE'
            order by c.table_name`);
    const rows = (Array.isArray(result) ? result : result.rows) as Array<{ t: string }>;
    return rows.map((r) => r.t);
};

/** A tenant's rows in every tenant table (and its tenants row), order-insensitive, for before/after comparisons. */
export const tenantSnapshot = async (server: Hapi.Server, tenantId: string): Promise<Record<string, string[]>> => {
    const { knex } = server.db;
    const normalize = (row: Record<string, unknown>) => JSON.stringify(Object.fromEntries(Object.entries(row).sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, v instanceof Date ? v.toISOString() : Buffer.isBuffer(v) ? v.toString('base64') : v])));
    const snapshot: Record<string, string[]> = {};
    for (const table of await tenantTables(server)) {
        snapshot[table] = (await knex(table).where('tenant_id', tenantId)).map(normalize).sort();
    }
    snapshot.tenants = (await knex('tenants').where('id', tenantId)).map(normalize);
    return snapshot;
};

/** How many rows a tenant owns in each tenant table. */
export const tenantRowCounts = async (server: Hapi.Server, tenantId: string): Promise<Record<string, number>> => {
    const counts: Record<string, number> = {};
    for (const table of await tenantTables(server)) {
        const [row] = await server.db.knex(table).where('tenant_id', tenantId).count({ n: '*' });
        counts[table] = Number((row as { n: number | string }).n);
    }
    counts.tenants = Number(((await server.db.knex('tenants').where('id', tenantId).count({ n: '*' }))[0] as { n: number | string }).n);
    return counts;
};
