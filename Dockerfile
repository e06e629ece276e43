# dbadmin under serverless-offline: the same Lambda functions, as one long-running container.
FROM node:22-bookworm-slim

WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    LICENSE_DATA_DIR=/app/license-data

COPY package.json package-lock.json ./
# The local host (serverless-offline, esbuild, tsx) lives in devDependencies; no install
# scripts are needed by anything we use.
RUN npm ci --include=dev --ignore-scripts && npm cache clean --force

COPY . .
RUN mkdir -p /app/license-data && chown -R node:node /app \
 && ln -s /app/bin/activate-license.cjs /usr/local/bin/activate-license
USER node

EXPOSE 3000
VOLUME ["/app/license-data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
  CMD node -e "fetch('http://127.0.0.1:3000/api/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"

# In production mode the start refuses to run without DATABASE_URL, AUTH_USER and AUTH_PASS.
CMD ["npm", "start"]
