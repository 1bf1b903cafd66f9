import Joi from 'joi';

export interface ConsoleOptions {
    /** Folder of the built console (index.html and assets/); default `dist/console` of the project. */
    assets?: string;
    /** External OIDC mode: the provider's issuer URL, whose token endpoint the console signs in at. */
    oidcIssuer?: string;
}

export const consoleOptionsSchema = Joi.object<ConsoleOptions, true>({
    assets: Joi.string(),
    oidcIssuer: Joi.string().uri({ scheme: ['http', 'https'] })
});
