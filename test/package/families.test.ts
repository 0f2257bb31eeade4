// Every model family is one folder, found by src/package/families.ts, with both halves of the contract: `sanitize`
// (the builder's FamilyModule) and `index` (`load`, the serving side); the manifest's family list is those folders.
import t from 'tap'
import {familyFile, familyNames, importFamily} from '../../src/package/families.js'
import {loadFamilies} from '../../src/package/builder/family.js'
import {FAMILIES} from '../../src/package/manifest.js'

t.test('the manifest names exactly the family folders', async t => {
  t.same(await familyNames(), [...FAMILIES].sort())
})

t.test('each family has a serving half and a building half', async t => {
  for (const name of await familyNames()) {
    const serve = await importFamily(name, 'index')
    t.type(serve?.load, 'function', `${name}: index exports load()`)
    const build = (await importFamily(name, 'sanitize')) as {default?: {family?: string; sanitize?: unknown}} | undefined
    t.equal(build?.default?.family, name, `${name}: sanitize's default export is its FamilyModule`)
    t.type(build?.default?.sanitize, 'function', `${name}: with sanitize()`)
  }
  t.same((await loadFamilies()).map(f => f.family).sort(), [...FAMILIES].sort(), 'the builder finds them all')
})

t.test('a folder without the part is undefined, not an error', async t => {
  t.equal(familyFile('no_such_family', 'index'), undefined)
  t.equal(await importFamily('no_such_family', 'sanitize'), undefined)
})
