/**
 * A `timestamp with time zone` as PostgreSQL writes it (DateStyle ISO: `2024-03-01 09:30:00.123456+01`)
 * shown in another zone: UTC, or the browser's own. Its instant and its full precision are kept:
 * the microseconds are carried as written, never through a Date (which holds milliseconds).
 * What it cannot read (infinity, a BC date) is shown as written. Pure functions.
 */

export type TimeZoneShown = 'stored' | 'local' | 'utc';

const ISO = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d{1,6})?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?$/;

const pad = (n: number, width = 2) => String(Math.abs(n)).padStart(width, '0');

/** `+05:30`, `-03`, `+00`, as PostgreSQL writes offsets (minutes only when it has some). */
function offsetText(minutes: number): string {
  const sign = minutes < 0 ? '-' : '+';
  const hours = Math.trunc(Math.abs(minutes) / 60);
  const rest = Math.abs(minutes) % 60;
  return `${sign}${pad(hours)}${rest ? `:${pad(rest)}` : ''}`;
}

/** The browser's offset at an instant, in minutes east of UTC. */
const browserOffset = (at: number) => -new Date(at).getTimezoneOffset();

export function timestampIn(text: string, zone: TimeZoneShown, offsetAt = browserOffset): string {
  if (zone === 'stored') return text;
  const parts = ISO.exec(text);
  if (!parts) return text;
  const [, y, mo, d, h, mi, s, fraction = '', sign, oh, om = '0', os = '0'] = parts;
  const offsetSeconds = (sign === '-' ? -1 : 1) * (Number(oh) * 3600 + Number(om) * 60 + Number(os));
  const utc = new Date(0);
  utc.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  utc.setUTCHours(Number(h), Number(mi), Number(s) - offsetSeconds, 0);
  const at = utc.getTime();
  if (Number.isNaN(at)) return text;
  const offset = zone === 'utc' ? 0 : offsetAt(at);
  const shown = new Date(at + offset * 60_000);
  const date = `${pad(shown.getUTCFullYear(), 4)}-${pad(shown.getUTCMonth() + 1)}-${pad(shown.getUTCDate())}`;
  const time = `${pad(shown.getUTCHours())}:${pad(shown.getUTCMinutes())}:${pad(shown.getUTCSeconds())}`;
  return `${date} ${time}${fraction}${offsetText(offset)}`;
}

/** PostgreSQL's names for the type, as the structure and the SQL fields give them. */
export const isTimestampTz = (type: string | number | undefined) =>
  type === 'timestamp with time zone' || type === 'timestamptz' || type === 1184;
