import type { Manifest } from '../lib/compose';
import * as core from '../plugins/core';
import * as docs from '../plugins/docs';
import * as kms from '../plugins/kms';
import * as kmsDb from '../plugins/kms-db';
import * as kmsHttp from '../plugins/kms-http';
import * as kmsPkcs11 from '../plugins/kms-pkcs11';
import * as oauth2 from '../plugins/oauth2';
import * as oid4vci from '../plugins/oid4vci';
import * as oid4vp from '../plugins/oid4vp';
import * as observability from '../plugins/observability';
import * as sessions from '../plugins/sessions';
import * as tenancy from '../plugins/tenancy';

/** Every plugin: the full service. A host composes its own manifest with a subset. */
export const manifest: Manifest = {
    name: 'default',
    plugins: [
        { plugin: core.plugin },
        { plugin: observability.plugin },
        { plugin: oauth2.plugin },
        { plugin: tenancy.plugin },
        { plugin: kms.plugin },
        { plugin: kmsDb.plugin },
        { plugin: kmsHttp.plugin },
        { plugin: kmsPkcs11.plugin },
        { plugin: sessions.plugin },
        { plugin: oid4vci.plugin },
        { plugin: oid4vp.plugin },
        { plugin: docs.plugin }
    ]
};
