// openai-node ResponsesWS: a function tool call, then the continuation with
// previous_response_id and the function_call_output, on one socket.
import { ResponsesWS, client, check, fail, outputText } from './clients.mjs';

const rws = new ResponsesWS(client());
const events = [];
rws.on('error', (e) => fail(`ResponsesWS error: ${e.message} ${JSON.stringify(e.error ?? null)}`));
rws.on('event', (e) => events.push(e.type));

// next resolves with the next terminal response, rejecting on an error event.
function next() {
  return new Promise((resolve, reject) => {
    const on = (e) => {
      if (!['response.completed', 'response.failed', 'response.incomplete', 'error'].includes(e.type)) return;
      rws.off('event', on);
      e.type === 'response.completed' ? resolve(e.response) : reject(new Error(JSON.stringify(e)));
    };
    rws.on('event', on);
  });
}

const tools = [{
  type: 'function', name: 'get_weather', description: 'Current weather for a city.', strict: true,
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'], additionalProperties: false },
}];

let done = next();
rws.send({
  type: 'response.create', model: 'sim', store: false, tools,
  input: [{ role: 'user', content: 'What is the weather in Lisbon?' }],
});
const r1 = await done;
const call = r1.output.find((item) => item.type === 'function_call');
check(call && call.call_id && call.name === 'get_weather', `want a get_weather call, got ${JSON.stringify(r1.output)}`);
check(events[0] === 'response.created', `first event ${events[0]}`);

done = next();
rws.send({
  type: 'response.create', model: 'sim', store: false, tools, previous_response_id: r1.id,
  input: [{ type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 24C, light breeze' }],
});
const r2 = await done;
check(r2.status === 'completed', `status ${r2.status}`);
check(r2.previous_response_id === r1.id, `previous_response_id ${r2.previous_response_id}, want ${r1.id}`);
const text = outputText(r2);
check(text.includes('Sunny, 24C, light breeze'), `answer does not quote the tool output: ${text}`);
check(text.includes('What is the weather in Lisbon?'), `answer does not quote the question: ${text}`);

rws.close({ code: 1000, reason: 'done' });
console.log(JSON.stringify({ ok: true, responses: [r1.id, r2.id], events: events.length, answer: text }));
