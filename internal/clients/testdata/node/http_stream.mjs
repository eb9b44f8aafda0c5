// openai-node client.responses.stream() over HTTP SSE: its strict accumulator must accept our
// events, for a text answer and for a function call.
import { client, check, outputText } from './clients.mjs';

const openai = client();

async function run(body) {
  const stream = openai.responses.stream(body);
  const types = [];
  for await (const event of stream) types.push(event.type);
  const final = await stream.finalResponse();
  check(types[0] === 'response.created', `first event ${types[0]}`);
  check(types.at(-1) === 'response.completed', `last event ${types.at(-1)}`);
  check(final.status === 'completed', `finalResponse status ${final.status}`);
  return { final, types };
}

const text = await run({ model: 'sim', store: false, input: 'Stream a short answer, please.' });
const answer = outputText(text.final);
check(answer.includes('Stream a short answer, please.'), `answer does not quote the input: ${answer}`);
check(text.final.output_text === answer, `output_text ${JSON.stringify(text.final.output_text)} != ${JSON.stringify(answer)}`);

const tools = [{
  type: 'function', name: 'get_weather', strict: true,
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'], additionalProperties: false },
}];
const call = await run({ model: 'sim', store: false, tools, input: 'Weather in Oslo?' });
const fc = call.final.output.find((item) => item.type === 'function_call');
check(fc && fc.call_id && fc.id && fc.arguments.includes('location'), `want a function call, got ${JSON.stringify(call.final.output)}`);

console.log(JSON.stringify({ ok: true, text: text.types.length, call: call.types.length, answer }));
