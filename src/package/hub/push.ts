// `splash package build … --push owner/repo`: a built package uploaded to a hub repo in one commit (splash.json
// and every file it lists), through @huggingface/hub's createRepo and uploadFiles: large files go by the LFS batch
// API, small ones inline. The package is verified against its manifest first. A dry run makes no request and says
// what would be sent.
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {createRepo, HubApiError, uploadFiles} from '@huggingface/hub'
import {SplashError} from '../../errors.js'
import {hubError, silenced} from './hub.js'
import {MANIFEST_FILE, readManifest} from '../manifest.js'
import {isRepoId} from '../paths.js'
import {checkPackage, verificationError} from '../verify.js'

export interface PushOptions {
  endpoint: string
  token?: string
  dryRun?: boolean
  log?: (line: string) => void
}

export interface PushResult {
  repo: string
  files: {path: string; size: number}[]
  commit?: string
}

export async function pushPackage(dir: string, repo: string, o: PushOptions): Promise<PushResult> {
  if (!isRepoId(repo)) throw new SplashError('invalid_repo', 'invalid_request', `--push ${repo}: expected a hub repo id such as owner/name`)
  const m = await readManifest(dir)
  const problems = await checkPackage(dir, m)
  if (problems.length > 0) throw verificationError(dir, problems)
  const files = [{path: MANIFEST_FILE, size: 0}, ...m.files.map(f => ({path: f.path, size: f.size}))]
  if (o.dryRun) {
    o.log?.(`dry run: would upload ${files.length} files of ${m.name} to ${o.endpoint}/${repo}`)
    return {repo, files}
  }
  if (!o.token) throw new SplashError('hub_unauthorized', 'authentication', `--push ${repo}: set HF_TOKEN to a token with write access to ${o.endpoint}`)
  const creds = {hubUrl: o.endpoint, accessToken: o.token}
  return silenced(async () => {
    try {
      await createRepo({repo, ...creds}).catch(err => {
        if (!(err instanceof HubApiError && err.statusCode === 409)) throw err // 409: it exists already
      })
      const out = await uploadFiles({
        repo,
        ...creds,
        useXet: false,
        commitTitle: `Splash package ${m.name} (${m.weights.quant})`,
        files: files.map(f => ({path: f.path, content: pathToFileURL(join(dir, f.path))})),
      })
      o.log?.(`pushed ${files.length} files to ${o.endpoint}/${repo}${out?.commit.oid ? ` (commit ${out.commit.oid.slice(0, 12)})` : ''}`)
      return {repo, files, commit: out?.commit.oid}
    } catch (err) {
      throw hubError(err, repo, o.endpoint) ?? err
    }
  })
}
