import { exitReason, nextRestart, RESTART_PAUSES_MS, RESTART_WINDOW_MS } from '../../bin/postgres-restart';

/** The embedded PostgreSQL's restarts (bin/postgres-restart): when, and when no more. */
describe('the restart of an embedded PostgreSQL that exited', () => {
  const now = 1_000_000;

  it('starts it again at once after a first exit', () => {
    expect(nextRestart([now], now)).toEqual({ pauseMs: 0 });
  });

  it('waits twice as long after each further exit within the window', () => {
    const exits = [now - 4000, now - 3000, now - 2000, now];

    expect(nextRestart(exits, now)).toEqual({ pauseMs: 2000 });
    expect(RESTART_PAUSES_MS).toEqual([0, 500, 1000, 2000, 4000]);
  });

  it('counts only the exits within the window: one a while ago starts a new count', () => {
    expect(nextRestart([now - RESTART_WINDOW_MS - 1, now - RESTART_WINDOW_MS, now], now)).toEqual({
      pauseMs: 0,
    });
  });

  it('gives up once more exits than pauses fall within the window', () => {
    const exits = Array.from({ length: RESTART_PAUSES_MS.length + 1 }, (_, i) => now - i * 1000);

    expect(nextRestart(exits, now)).toEqual({ giveUp: RESTART_PAUSES_MS.length + 1 });
  });

  it('names a signal when one ended it, else the exit code', () => {
    expect(exitReason(null, 'SIGKILL')).toBe('signal SIGKILL');
    expect(exitReason(1, null)).toBe('exit code 1');
  });
});
