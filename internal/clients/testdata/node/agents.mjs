// @openai/agents: two runs of an agent with a function tool. The second run continues the
// first with previousResponseId. TETHER_AGENTS_TRANSPORT=ws uses useResponsesWebSocket and
// installs the ws package as the global WebSocket (Node 20 has none); ws-native expects the
// global from node --experimental-websocket; anything else uses HTTP.
import { load, baseURL, check } from './clients.mjs';

const transport = process.env.TETHER_AGENTS_TRANSPORT ?? 'http';
const ws = transport.startsWith('ws');
if (transport === 'ws') {
  globalThis.WebSocket ??= (await load('ws')).default;
}
const { Agent, Runner, tool, setTracingDisabled, OpenAIProvider } = await load('@openai/agents');
const { z } = await load('zod');
setTracingDisabled(true); // otherwise it exports traces to api.openai.com

const provider = new OpenAIProvider({ apiKey: 'sk-test', baseURL, useResponses: true, useResponsesWebSocket: ws });
const calls = [];
const getWeather = tool({
  name: 'get_weather', description: 'Current weather.', parameters: z.object({ location: z.string() }),
  execute: async ({ location }) => { calls.push(location); return `Sunny in ${location}, 24C`; },
});
const agent = new Agent({ name: 'weather', instructions: 'Answer with the weather.', model: 'sim', tools: [getWeather] });
const runner = new Runner({ modelProvider: provider });

const r1 = await runner.run(agent, 'Weather in Lisbon?');
check(String(r1.finalOutput).includes('Sunny in Lisbon, 24C'), `first answer: ${r1.finalOutput}`);
const r2 = await runner.run(agent, 'And in Porto?', { previousResponseId: r1.lastResponseId });
const text = String(r2.finalOutput);
check(text.includes('Sunny in Lisbon, 24C') && text.includes('Sunny in Porto, 24C'), `second answer lost the history: ${text}`);
check(calls.join() === 'Lisbon,Porto', `tool calls ${calls}`);
await provider.close?.();
console.log(JSON.stringify({ ok: true, transport, calls, answer: text }));
