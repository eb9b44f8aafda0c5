// Vercel AI SDK (ai + @ai-sdk/openai) over HTTP: a tool loop with generateText, then a second
// one continued with providerOptions.openai.previousResponseId.
import { load, baseURL, check } from './clients.mjs';

const { generateText, tool, stepCountIs } = await load('ai');
const { createOpenAI } = await load('@ai-sdk/openai');
const { z } = await load('zod');

const openai = createOpenAI({ apiKey: 'sk-test', baseURL });
const calls = [];
const tools = {
  get_weather: tool({
    description: 'Current weather.', inputSchema: z.object({ location: z.string() }),
    execute: async ({ location }) => { calls.push(location); return `Sunny in ${location}, 24C`; },
  }),
};
const r1 = await generateText({ model: openai.responses('sim'), prompt: 'Weather in Lisbon?', tools, stopWhen: stepCountIs(3) });
check(r1.text.includes('Sunny in Lisbon, 24C'), `first answer: ${r1.text}`);
const id = r1.providerMetadata?.openai?.responseId;
check(typeof id === 'string' && id.startsWith('resp_'), `responseId ${id}`);
const r2 = await generateText({
  model: openai.responses('sim'), prompt: 'And in Porto?', tools, stopWhen: stepCountIs(3),
  providerOptions: { openai: { previousResponseId: id } },
});
check(r2.text.includes('Sunny in Lisbon, 24C') && r2.text.includes('Sunny in Porto, 24C'), `second answer lost the history: ${r2.text}`);
check(calls.join() === 'Lisbon,Porto', `tool calls ${calls}`);
console.log(JSON.stringify({ ok: true, steps: [r1.steps.length, r2.steps.length], answer: r2.text }));
