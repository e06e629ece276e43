/**
 * A function built into the crash test's host only (test/security/host-crash.test.ts): it answers,
 * then fails in the background the way a function's own code can, `?how=rejection` (a promise
 * nobody waits for) or `?how=exception` (a throw from a timer's callback).
 */
export const handler = async (event: { queryStringParameters?: Record<string, string> }) => {
  const how = event.queryStringParameters?.how;
  if (how === 'rejection') void Promise.reject(new Error('planted: a rejection nobody waits for'));
  if (how === 'exception') {
    setTimeout(() => {
      throw new Error('planted: thrown from a timer');
    }, 20);
  }
  return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ how }) };
};
