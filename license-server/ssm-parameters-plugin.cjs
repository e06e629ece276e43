'use strict';
// The service's deploy check (deploy/ssm-parameters-plugin.cjs), for this service's parameters:
// serverless accepts only local plugins below the service's directory.
module.exports = require('../deploy/ssm-parameters-plugin.cjs');
