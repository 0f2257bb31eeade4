// The page's modal dialogs: the API key prompt and the rename prompt.
import {$} from './dom.js'

let keyPrompt = null
export function askKey(reason) {
  if (keyPrompt) return keyPrompt
  const dialog = $('key-dialog')
  const input = $('key-input')
  $('key-reason').textContent = `${reason} It is kept in this browser only.`
  input.value = ''
  keyPrompt = new Promise(resolve => {
    const done = value => {
      dialog.removeEventListener('close', onClose)
      $('key-cancel').removeEventListener('click', onCancel)
      keyPrompt = null
      resolve(value)
    }
    const onClose = () => done(dialog.returnValue === 'save' && input.value.trim() ? input.value.trim() : null)
    const onCancel = () => dialog.close('cancel')
    dialog.addEventListener('close', onClose)
    $('key-cancel').addEventListener('click', onCancel)
    dialog.returnValue = ''
    dialog.showModal()
    input.focus()
  })
  return keyPrompt
}
$('key-form').addEventListener('submit', e => {
  e.preventDefault()
  if ($('key-input').value.trim()) $('key-dialog').close('save')
})

export function askRename(current) {
  const dialog = $('rename-dialog')
  const input = $('rename-input')
  input.value = current
  return new Promise(resolve => {
    const onClose = () => {
      dialog.removeEventListener('close', onClose)
      resolve(dialog.returnValue === 'save' ? input.value.trim() : null)
    }
    dialog.addEventListener('close', onClose)
    dialog.returnValue = ''
    dialog.showModal()
    input.select()
  })
}
$('rename-form').addEventListener('submit', e => {
  e.preventDefault()
  if ($('rename-input').value.trim()) $('rename-dialog').close('save')
})
$('rename-cancel').addEventListener('click', () => $('rename-dialog').close('cancel'))
