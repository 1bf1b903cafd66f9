/** The roles of the service (lib/auth/roles.ts), resolved the way the service resolves them for route access. */
const ALL = ['tenant:manage', 'tenant:read', 'tenant:admin', 'issuance:offer', 'issuance:config', 'presentation:request', 'presentation:config', 'key:manage', 'key:read', 'registrar:manage', 'metrics:read'];
export const TENANT_ROLES = ALL.filter((r) => r !== 'tenant:manage');
const ALIASES: Record<string, string> = { 'issuance:manage': 'issuance:config', 'presentation:manage': 'presentation:config', 'tenants:manage': 'tenant:manage' };

export const ROLE_NAMES = ALL;

export const effectiveRoles = (roles: readonly string[]): Set<string> => {
    const scopes = new Set(roles.map((r) => ALIASES[r] ?? r));
    if (scopes.has('tenant:admin')) {
        TENANT_ROLES.forEach((r) => scopes.add(r));
    }
    return scopes;
};

export const anyOf = (scopes: Set<string>, roles: readonly string[]): boolean => roles.some((r) => scopes.has(r));
