import { ConnectionBudget, type IdleSession } from '#lib/db/connection-budget';

/**
 * The process's budget of session connections: a new login never waits for another role's idle
 * session to say goodbye while the budget can keep a slot or two free ahead of it.
 */

/** An idle session whose goodbye lasts until the test says so. */
function idleSession() {
  let finish = () => {};
  const session = {
    closing: false,
    close: () => {
      session.closing = true;
      return new Promise<void>((resolve) => {
        finish = resolve;
      });
    },
    finish: () => finish(),
  };
  return session satisfies IdleSession;
}

/** Fills `count` slots with sessions that went idle, oldest first. */
async function idleSessions(budget: ConnectionBudget, count: number) {
  const sessions: Array<ReturnType<typeof idleSession>> = [];
  for (let i = 0; i < count; i++) {
    expect(await budget.take(0)).toBe(true);
    const session = idleSession();
    budget.park(session);
    sessions.push(session);
  }
  const [oldest, next] = sessions;
  if (!oldest || !next) throw new Error('at least two sessions');
  return { sessions, oldest, next };
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('the connection budget', () => {
  it('closes the oldest idle session in the background as it fills, so the next login finds a slot', async () => {
    const budget = new ConnectionBudget(32);
    const { sessions, oldest, next } = await idleSessions(budget, 30);
    expect(sessions.some((each) => each.closing)).toBe(false);

    // The 31st slot leaves one free: the oldest idle session is asked to go, and no one waits for it.
    expect(await budget.take(0)).toBe(true);
    expect(sessions.map((each) => each.closing).indexOf(true)).toBe(0);
    expect(sessions.filter((each) => each.closing)).toHaveLength(1);
    expect(budget.use.open).toBe(31);

    oldest.finish();
    await settled();
    expect(budget.use.open).toBe(30);

    // The next cold login takes a free slot at once, while another old session makes room again.
    let taken = false;
    budget.take(0).then((ok) => {
      taken = ok;
    });
    await settled();
    expect(taken).toBe(true);
    expect(next.closing).toBe(true);
  });

  it('hands the slot of a session closed ahead of need to a request waiting for one', async () => {
    const budget = new ConnectionBudget(32);
    const { sessions, oldest } = await idleSessions(budget, 31);
    expect(oldest.closing).toBe(true);
    // Every other session is in use now: a request waits for a slot.
    for (const each of sessions.slice(1)) budget.unpark(each);
    expect(await budget.take(0)).toBe(true);
    let granted: boolean | undefined;
    budget.take(60_000).then((ok) => {
      granted = ok;
    });
    await settled();
    expect(granted).toBeUndefined();

    oldest.finish();
    await settled();

    expect(granted).toBe(true);
    expect(budget.use.open).toBe(32);
  });

  it('keeps every session of a small budget (a Lambda container) warm until a login needs its slot', async () => {
    const budget = new ConnectionBudget(4);
    const { sessions, oldest } = await idleSessions(budget, 4);
    expect(sessions.some((each) => each.closing)).toBe(false);

    // A fifth login: the oldest goes, and this login waits for its goodbye, as before.
    let taken = false;
    budget.take(0).then((ok) => {
      taken = ok;
    });
    await settled();
    expect(oldest.closing).toBe(true);
    expect(taken).toBe(false);
    oldest.finish();
    await settled();
    expect(taken).toBe(true);
    expect(budget.use.open).toBe(4);
  });
});
