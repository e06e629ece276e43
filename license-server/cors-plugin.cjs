'use strict';
// The service's CORS policy (../deploy/cors-plugin.cjs): no other origin's page may read the license
// server's answers. Here because osls takes local plugins only by a path inside the service.
module.exports = require('../deploy/cors-plugin.cjs');
