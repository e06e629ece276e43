import { effect, signal } from '@preact/signals';

/**
 * The colour theme: the system's, light or dark, kept in the browser and applied to the page.
 */

export type Theme = 'system' | 'light' | 'dark';
const KEY = 'dbadmin.theme';
const stored = localStorage.getItem(KEY);

/** The user's choice; `system` follows the operating system's setting. */
export const theme = signal<Theme>(stored === 'light' || stored === 'dark' ? stored : 'system');
const systemDark = window.matchMedia('(prefers-color-scheme: dark)');
export const dark = signal(theme.value === 'dark' || (theme.value === 'system' && systemDark.matches));

systemDark.addEventListener('change', () => {
  if (theme.value === 'system') dark.value = systemDark.matches;
});

effect(() => {
  if (theme.value === 'system') localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, theme.value);
  dark.value = theme.value === 'dark' || (theme.value === 'system' && systemDark.matches);
});
effect(() => {
  document.documentElement.dataset.theme = dark.value ? 'dark' : 'light';
});

const ORDER: Theme[] = ['system', 'light', 'dark'];
export const cycleTheme = () => {
  theme.value = ORDER[(ORDER.indexOf(theme.value) + 1) % ORDER.length] as Theme;
};
