import { DomainError, OAuthError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import type { OutboundPolicy } from '../../../lib/outbound';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import type { SessionLogger } from '../../sessions/session-log';
import { deliverWebhook } from '../../../lib/webhooks';

export const NOTIFICATION_EVENTS = ['credential_accepted', 'credential_failure', 'credential_deleted'] as const;

export interface NotificationRequest {
    notification_id?: string;
    event?: string;
    event_description?: string;
}

/**
 * Spec 6.2 and 6.3: the event is recorded on the session first, then the offer's webhook is called, then the
 * status follows (accepted → completed; failure or deleted → failed). A failed webhook answers 500 to the wallet
 * and leaves the status as it was.
 */
export class NotificationService {
    constructor(private readonly deps: { outbound: OutboundPolicy; sessions: SessionService; log: Logger }) {}

    async notify(session: LiveSession<'issuance'>, body: NotificationRequest, log: SessionLogger): Promise<void> {
        const { notification_id: notificationId, event } = body;
        if (!notificationId || !event) {
            throw new OAuthError(400, 'invalid_notification_request', 'notification_id and event are required');
        }
        if (!(NOTIFICATION_EVENTS as readonly string[]).includes(event)) {
            throw new OAuthError(400, 'invalid_notification_request', `event must be one of ${NOTIFICATION_EVENTS.join(', ')}`);
        }
        const { data } = session;
        const issued = data.issued.find((i) => i.notificationId === notificationId);
        if (!issued) {
            throw new OAuthError(400, 'invalid_notification_id', 'The notification_id does not belong to this session');
        }
        if (session.status !== 'fetched') {
            throw new OAuthError(400, 'invalid_notification_request', `The issuance session is ${session.status}; notifications are taken while it is fetched`);
        }
        const recordedEvent = { notificationId, event, ...(body.event_description ? { description: body.event_description } : {}), at: new Date().toISOString() };
        await this.deps.sessions.mutateData<'issuance'>(session, (current) => ({ ...current, events: [...current.events, recordedEvent] }));

        // The target was resolved when the offer was created (spec 6.2).
        if (data.webhook) {
            const result = await deliverWebhook(this.deps.outbound, data.webhook, {
                notification: { id: notificationId, event, credentialConfigurationId: issued.credentialConfigurationId },
                session: session.id
            }, this.deps.log);
            if (!result.delivered) {
                throw new DomainError(500, 'The notification could not be delivered to the issuer backend', 'server_error');
            }
        }
        await this.deps.sessions.transition(session.id, ['fetched'], event === 'credential_accepted' ? 'completed' : 'failed');
        log.info({ event: 'notification', notificationEvent: event }, `wallet notification ${event}`);
    }
}
