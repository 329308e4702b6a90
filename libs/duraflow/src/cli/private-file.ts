import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { OutputFileExistsError, OutputFileIsLinkError } from './cli.errors';

/** Read and write for the owner only: what the file holds is production data. */
const PRIVATE_MODE = 0o600;
/** A new file, never one that is there, never through a symbolic link. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Writes `content` to a new file at `file`, readable by its owner only (0600, whatever the
 * umask). A symbolic link there is refused, so a link planted where the file goes cannot make
 * the command overwrite its target; so is a file that exists, unless `replace`: then the
 * content goes to a new private file beside it, which is renamed over it (a rename replaces
 * the name, it never writes through a link, and the file is never seen half written).
 */
export async function writePrivateFile(file: string, content: string, options: { replace: boolean }): Promise<void> {
  const existing = await lstat(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (existing?.isSymbolicLink()) throw new OutputFileIsLinkError(file);
  if (existing && !options.replace) throw new OutputFileExistsError(file);
  if (!existing) {
    await createWith(file, content);
    return;
  }
  const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  await createWith(temporary, content);
  try {
    await rename(temporary, file);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}

/** Creates `file` (O_CREAT | O_EXCL | O_NOFOLLOW, 0600) with `content`; removed again if the write fails. */
async function createWith(file: string, content: string): Promise<void> {
  const handle = await open(file, CREATE_NEW, PRIVATE_MODE).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code === 'ELOOP') throw new OutputFileIsLinkError(file);
    if (error.code !== 'EEXIST') throw error;
    throw (await lstat(file).catch(() => undefined))?.isSymbolicLink() ? new OutputFileIsLinkError(file) : new OutputFileExistsError(file);
  });
  try {
    await handle.chmod(PRIVATE_MODE); // the umask can only take bits away; this says it outright
    await handle.writeFile(content);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => undefined);
    await unlink(file).catch(() => undefined);
    throw error;
  }
  await handle.close();
}
