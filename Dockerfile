# dbadmin as one long-running container: the same Lambda functions, prebuilt, under
# serverless-offline. Every RUN works relative to WORKDIR: test/unit/container.test.ts runs the
# same commands to build and start the image's file set, since CI has no Docker engine.

# Build: every dependency, then what production runs (npm run build -> dist/).
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Nothing we use needs an install script (esbuild's binary comes as a package of its own).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json serverless.yml ./
COPY bin ./bin
# esbuild's plugins, read by npm run build as by serverless-esbuild (serverless.yml custom.esbuild).
COPY deploy/esbuild-plugins.cjs ./deploy/esbuild-plugins.cjs
# The CORS policy the host serves under: npm run build puts it beside dist/serverless.yml.
COPY deploy/cors-plugin.cjs ./deploy/cors-plugin.cjs
# DBADMIN_RESERVED_CONCURRENCY as packaging applies it, for the Lambda total npm run build prints.
COPY deploy/concurrency-plugin.cjs ./deploy/concurrency-plugin.cjs
COPY console ./console
COPY functions ./functions
COPY lib ./lib
RUN npm run build && mkdir license-data

# Run: production dependencies only (serverless-offline and the framework it plugs into; the
# functions carry their own code), the bundles, and nothing that compiles or watches.
FROM node:22-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    LICENSE_DATA_DIR=/app/license-data \
    PATH=/app/dist/bin:$PATH
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build --chown=node:node /app/license-data ./license-data
USER node

EXPOSE 3000
VOLUME ["/app/license-data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:3000/api/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# node itself, not npm: signals reach the service (run with an init, as compose's init: true
# does, so PID 1 reaps any child). Production mode refuses to start without DATABASE_URL,
# AUTH_USER, AUTH_PASS and DBADMIN_SECRET. The heap cap is npm start's (README: The local host):
# without it V8 lets the heap grow to 600 MB under load before it collects.
CMD ["node", "--max-old-space-size=384", "dist/bin/start.js"]
