import path from 'node:path';

/**
 * The require hook that lets a plain `node` run the project's TypeScript with decorator metadata
 * (swc): a child process started with `node -r <SWC_REGISTER> file.ts`.
 */
export const SWC_REGISTER = path.join(__dirname, 'swc-register.js');
