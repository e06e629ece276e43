import { render } from 'preact';
import { App } from './app';
import './theme';
import './style.css';

/**
 * The console's entry point: the app, rendered into the page lib/console serves.
 */

render(<App />, document.getElementById('app') as HTMLElement);
