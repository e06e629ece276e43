import { effect, signal } from '@preact/signals';
import { isTimestampTz, type TimeZoneShown, timestampIn } from './timestamps';
import { cellText } from './values';

/**
 * Which zone the console shows `timestamp with time zone` values in: as stored (the database's
 * zone, PostgreSQL's text), the browser's own, or UTC; kept in the browser.
 */

const KEY = 'dbadmin.timeZone';
const stored = localStorage.getItem(KEY);

export const timeZoneShown = signal<TimeZoneShown>(
  stored === 'local' || stored === 'utc' ? stored : 'stored',
);

effect(() => {
  if (timeZoneShown.value === 'stored') localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, timeZoneShown.value);
});

export function TimeZoneChoice() {
  return (
    <label class="inline">
      <span class="muted">Times</span>
      <select
        aria-label="Times shown in"
        value={timeZoneShown.value}
        onChange={(event) => {
          timeZoneShown.value = event.currentTarget.value as TimeZoneShown;
        }}
      >
        <option value="stored">as stored</option>
        <option value="local">in my time zone</option>
        <option value="utc">in UTC</option>
      </select>
    </label>
  );
}

/** A value's text as the grid and the SQL results show it: a timestamptz in the zone chosen. */
export function shownText(type: string | number | undefined, value: unknown): string {
  const text = cellText(value);
  return typeof value === 'string' && isTimestampTz(type) ? timestampIn(text, timeZoneShown.value) : text;
}
