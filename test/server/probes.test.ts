import t from 'tap'
import {buildApp} from '../../src/server/app.js'
import {ModelHost} from '../../src/serving/model-host.js'

const host = {host: 'localhost'}

t.test('/health is 200 while serving; /ready is 503 until the model is loaded', async t => {
  const modelHost = new ModelHost()
  const app = await buildApp({modelHost})
  t.teardown(() => app.close())
  t.equal((await app.inject({url: '/health', headers: host})).statusCode, 200)
  const before = await app.inject({url: '/ready', headers: host})
  t.equal(before.statusCode, 503)
  t.equal(before.json().status, 'no_model')
  modelHost.setLoading()
  t.equal((await app.inject({url: '/ready', headers: host})).json().status, 'loading')
  modelHost.setReady({id: 'splash/tiny', contextLength: 4096, created: 1, ownedBy: 'splash'})
  const after = await app.inject({url: '/ready', headers: host})
  t.equal(after.statusCode, 200)
  t.equal(after.json().model, 'splash/tiny')
})

t.test('/v1/models lists the served model and its context length once loaded', async t => {
  const modelHost = new ModelHost()
  const app = await buildApp({modelHost})
  t.teardown(() => app.close())
  t.same((await app.inject({url: '/v1/models', headers: host})).json(), {object: 'list', data: []})
  modelHost.setReady({id: 'splash/tiny', contextLength: 4096, created: 1700000000, ownedBy: 'splash'})
  const list = (await app.inject({url: '/v1/models', headers: host})).json()
  t.equal(list.data.length, 1)
  t.match(list.data[0], {id: 'splash/tiny', object: 'model', owned_by: 'splash', context_length: 4096})
  const one = await app.inject({url: '/v1/models/splash/tiny', headers: host})
  t.equal(one.statusCode, 200)
  t.equal(one.json().id, 'splash/tiny')
  const missing = await app.inject({url: '/v1/models/other', headers: host})
  t.equal(missing.statusCode, 404)
  t.equal(missing.json().error.code, 'model_not_found')
})
