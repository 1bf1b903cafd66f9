import type { TenantContext } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import { presentationConfigKind } from '../../../resources/presentation-config';
import type { PresentedCredentials, PresentationVerifier } from '../../oid4vci/services/interactive';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import type { PresentationRequests } from './requests';
import type { PresentationResponses } from './responses';

/**
 * The verifier behind the interactive authorization endpoint's openid4vp_presentation steps: the same presentation
 * sessions, signed request objects and response verification as POST /api/verifier/offer and the response
 * endpoint, only the request travels inside the endpoint's answer and the response comes back through it.
 */
export class InteractivePresentationVerifier implements PresentationVerifier {
    constructor(private readonly deps: { registry: Registry; sessions: SessionService; requests: PresentationRequests; responses: PresentationResponses }) {}

    private ctx(tenantId: string): TenantContext & { tenantId: string } {
        return { tenantId, clientId: 'system:oid4vci-interactive', roles: [] };
    }

    async latestConfiguration(tenantId: string): Promise<string | undefined> {
        const configs = await this.deps.registry.list(this.ctx(tenantId), presentationConfigKind);
        return configs.sort((a, b) => new Date(b.createdAt).getTime() - new Date(a.createdAt).getTime())[0]?.spec.id;
    }

    async request(tenantId: string, presentationConfigId: string): Promise<{ sessionId: string; request: string }> {
        const { session } = await this.deps.requests.create(this.ctx(tenantId), { requestId: presentationConfigId, response_type: 'uri' });
        const created = await this.deps.sessions.get(session) as LiveSession<'presentation'>;
        return { sessionId: session, request: await this.deps.requests.requestObject(created) };
    }

    async verify(sessionId: string, response: Record<string, unknown>): Promise<{ verified: true; credentials: PresentedCredentials['credentials'] } | { verified: false; reason: string }> {
        const session = await this.deps.sessions.get(sessionId);
        if (session?.type !== 'presentation' || !session.data) {
            return { verified: false, reason: 'the presentation session no longer exists' };
        }
        await this.deps.responses.receive(session as LiveSession<'presentation'>, response);
        const recorded = await this.deps.sessions.get(sessionId);
        const result = (recorded?.data as { result?: { outcome?: { message?: string }; credentials?: Array<{ id: string; values: Array<Record<string, unknown>> }> } } | null)?.result;
        if (recorded?.status !== 'completed' || !result?.credentials) {
            return { verified: false, reason: recorded?.errorReason ?? result?.outcome?.message ?? 'verification failed' };
        }
        const formats = new Map((session.data as { dcqlQuery: { credentials: Array<{ id: string; format: string }> } }).dcqlQuery.credentials.map((q) => [q.id, q.format]));
        return { verified: true, credentials: result.credentials.map((c) => ({ id: c.id, format: formats.get(c.id) ?? 'unknown', values: c.values })) };
    }
}
