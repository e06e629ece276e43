import { timestampIn } from '../../console/src/timestamps';

describe('a timestamptz shown in another zone', () => {
  it('keeps the instant and every microsecond, in UTC', () => {
    expect(timestampIn('2024-03-01 09:30:00.123456+01', 'utc')).toBe('2024-03-01 08:30:00.123456+00');
    expect(timestampIn('2024-03-01 00:10:00+05:30', 'utc')).toBe('2024-02-29 18:40:00+00');
    expect(timestampIn('1999-12-31 23:59:59.9-03', 'utc')).toBe('2000-01-01 02:59:59.9+00');
    expect(timestampIn('0044-03-15 12:00:00+00', 'utc')).toBe('0044-03-15 12:00:00+00');
  });

  it('shows the browser’s zone with its offset at that instant (summer and winter)', () => {
    // Berlin's rule for 2024: +02 from 31 March to 27 October, else +01.
    const berlin = (at: number) =>
      at >= Date.UTC(2024, 2, 31, 1) && at < Date.UTC(2024, 9, 27, 1) ? 120 : 60;
    expect(timestampIn('2024-07-01 10:00:00.000001+00', 'local', berlin)).toBe(
      '2024-07-01 12:00:00.000001+02',
    );
    expect(timestampIn('2024-01-01 10:00:00+00', 'local', berlin)).toBe('2024-01-01 11:00:00+01');
    expect(timestampIn('2024-01-01 10:00:00+00', 'local', () => 330)).toBe('2024-01-01 15:30:00+05:30');
    expect(timestampIn('2024-01-01 10:00:00+00', 'local', () => -210)).toBe('2024-01-01 06:30:00-03:30');
    // The browser's own, by default.
    const own = -new Date(Date.UTC(2024, 0, 1, 10)).getTimezoneOffset();
    expect(timestampIn('2024-01-01 10:00:00+00', 'local')).toBe(
      timestampIn('2024-01-01 10:00:00+00', 'local', () => own),
    );
  });

  it('leaves what it cannot read, and the stored choice, as written', () => {
    for (const text of ['infinity', '-infinity', '0044-03-15 12:00:00+00 BC', 'not a time'])
      expect(timestampIn(text, 'utc')).toBe(text);
    expect(timestampIn('2024-03-01 09:30:00+01', 'stored')).toBe('2024-03-01 09:30:00+01');
  });
});
