import type { Logger } from './logging';
import { outboundRequest, type OutboundPolicy } from './outbound';

export type WebhookAuth = { type: 'none' } | { type: 'apiKey'; config: { headerName: string; value: string } };

export interface WebhookTarget {
    url: string;
    auth?: WebhookAuth;
}

export interface WebhookResult {
    delivered: boolean;
    status?: number;
    /** The receiver's JSON answer (a presentation webhook may answer `{redirectUri}`). */
    body?: unknown;
    error?: string;
}

/** One POST with a JSON body through the outbound guard; no retries (spec 6.3). Never throws. */
export const deliverWebhook = async (policy: OutboundPolicy, target: WebhookTarget, body: object, log: Logger): Promise<WebhookResult> => {
    const headers: Record<string, string> = {};
    if (target.auth?.type === 'apiKey') {
        headers[target.auth.config.headerName] = target.auth.config.value;
    }
    try {
        const res = await outboundRequest(policy, target.url, { method: 'POST', headers, body });
        if (res.status < 200 || res.status > 299) {
            log.warn({ status: res.status, host: new URL(target.url).host }, 'webhook receiver answered with an error');
            return { delivered: false, status: res.status, error: `receiver answered ${res.status}` };
        }
        let answer: unknown;
        try {
            answer = res.body.length ? res.json() : undefined;
        }
        catch {
            answer = undefined;
        }
        return { delivered: true, status: res.status, body: answer };
    }
    catch (err) {
        log.warn({ err: (err as Error).message }, 'webhook delivery failed');
        return { delivered: false, error: (err as Error).message };
    }
};
