#!/usr/bin/env bash
# Runs the standalone gateway on its embedded default (config/samples/standalone) with the two
# local mock providers the samples point at. Ctrl-C stops all three.
#   API:   http://127.0.0.1:8080/v1/chat/completions, /v1/responses, /v1/embeddings (gpt-4o,
#          gpt-4o-mini, text-embedding-3-small), /v1/messages
#   Admin: http://127.0.0.1:9090/admin/v1/channels, /admin/v1/events, /metrics
#   Mocks: http://127.0.0.1:9101/_mock/behavior breaks provider A (README); end the outage with
#          curl -s localhost:9101/_mock/behavior -d '{"model":"gpt-4o-2024-08-06","behavior":null}'
#          or curl -s -X POST 'localhost:9101/_mock/reset?behaviors=1' (every model back to normal)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/switchyard
[[ -x $bin ]] || go build -o "$bin" ./cmd/switchyard
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
"$bin" mock-provider --listen 127.0.0.1:9101 --name provider-a --api-key sk-local-provider-a & pids+=($!)
"$bin" mock-provider --listen 127.0.0.1:9102 --name provider-b --api-key local-provider-b-key & pids+=($!)
"$bin" proxy --config config/samples/standalone --listen 127.0.0.1:8080 --admin-listen 127.0.0.1:9090 --access-log - & pids+=($!)
wait -n "${pids[@]}"
