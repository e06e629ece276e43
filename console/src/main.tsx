import { render } from 'preact';
import { App } from './app';
import './theme';
import './style.css';

render(<App />, document.getElementById('app') as HTMLElement);
