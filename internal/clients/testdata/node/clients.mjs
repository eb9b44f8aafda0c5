// Shared helpers for the openai-node scripts. The packages are loaded from
// $TETHER_NODE_CLIENTS/node_modules (installed by .ci/install-clients), not from the repository.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = process.env.TETHER_NODE_CLIENTS;
const base = process.env.TETHER_BASE_URL; // http://127.0.0.1:PORT/v1
if (!dir || !base) {
  fail('TETHER_NODE_CLIENTS and TETHER_BASE_URL must be set');
}
const require = createRequire(path.join(path.resolve(dir), 'node_modules', '.clients.cjs'));

export const OpenAIModule = require('openai');
export const OpenAI = OpenAIModule.OpenAI ?? OpenAIModule.default;
export const { ResponsesWS } = require('openai/resources/responses/ws');
export const baseURL = base;

// load imports an npm package (ESM or CommonJS) from $TETHER_NODE_CLIENTS/node_modules.
export function load(name) {
  return import(pathToFileURL(require.resolve(name)).href);
}

export function client() {
  return new OpenAI({ apiKey: 'sk-test', baseURL, maxRetries: 0, timeout: 20_000 });
}

export function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

export function check(cond, msg) {
  if (!cond) fail(msg);
}

// outputText joins the output_text parts of a response's message items.
export function outputText(response) {
  let text = '';
  for (const item of response.output ?? []) {
    if (item.type !== 'message') continue;
    for (const part of item.content ?? []) {
      if (part.type === 'output_text') text += part.text;
    }
  }
  return text;
}

// A hard deadline, so that a hung socket fails the script instead of the Go test's timeout.
setTimeout(() => fail('timed out after 30s'), 30_000).unref();
