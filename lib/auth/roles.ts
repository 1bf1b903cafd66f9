import Joi from 'joi';

/** The role enumeration of the specification, plus tenant:admin (a storable role: every tenant role in its tenant). */
export const ROLES = [
    'tenant:manage',
    'tenant:read',
    'tenant:admin',
    'issuance:offer',
    'issuance:config',
    'presentation:request',
    'presentation:config',
    'key:manage',
    'key:read',
    'registrar:manage',
    'metrics:read'
] as const;

export type Role = (typeof ROLES)[number];

/** Names used elsewhere for the same roles; accepted wherever a role is given and stored as the canonical name. */
export const ROLE_ALIASES: Record<string, Role> = {
    'issuance:manage': 'issuance:config',
    'presentation:manage': 'presentation:config',
    'tenants:manage': 'tenant:manage'
};

/** Every role that acts inside one tenant; tenant:admin holds all of them. */
export const TENANT_ROLES: Role[] = ROLES.filter((r) => r !== 'tenant:manage');

// A custom rule rather than .valid(): Joi stops at a matching .valid() value, so an alias would not be mapped.
export const roleSchema = Joi.string()
    .custom((value: string, helpers) => {
        const role = ROLE_ALIASES[value] ?? value;
        return (ROLES as readonly string[]).includes(role) ? role : helpers.error('any.only', { valids: [...ROLES, ...Object.keys(ROLE_ALIASES)] });
    })
    .description(`One of ${ROLES.join(', ')} (aliases: ${Object.keys(ROLE_ALIASES).join(', ')})`);

export const canonicalRole = (role: string): string => ROLE_ALIASES[role] ?? role;

/**
 * The scopes a client's roles grant, for route access checks: aliases resolved, tenant:admin expanded to every
 * tenant role. Unknown roles (e.g. from an external provider) are kept but match no route.
 */
export const effectiveScopes = (roles: readonly string[]): string[] => {
    const scopes = new Set(roles.map(canonicalRole));
    if (scopes.has('tenant:admin')) {
        TENANT_ROLES.forEach((r) => scopes.add(r));
    }
    return [...scopes];
};

/** Roles a caller may grant: tenant:manage grants any; a tenant client only the tenant roles it holds itself. */
export const grantableRoles = (callerScopes: readonly string[]): Set<string> =>
    callerScopes.includes('tenant:manage') ? new Set(ROLES) : new Set(callerScopes.filter((s) => s !== 'tenant:manage'));

/** Route access: a write role of the resource, and for reads also tenant:read. */
export const access = {
    write: (...roles: Role[]): string[] => [...roles],
    read: (...roles: Role[]): string[] => [...roles, 'tenant:read']
};
