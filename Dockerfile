# syntax=docker/dockerfile:1
# Small, non-root image that runs respool.
#   docker build -t respool .
#   docker run --rm -p 6380:6380 respool --listen 0.0.0.0:6380 --upstream valkey:6379

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY bin ./bin
COPY config ./config
# The image's built-in unprivileged user; respool needs no privileges (listen on ports > 1024).
USER node
EXPOSE 6380 9121
ENTRYPOINT ["node", "/app/bin/respool.js"]
CMD ["--help"]
