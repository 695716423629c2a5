//! A look at an Arrow IPC input's compressed buffers before arrow-ipc decodes them.
//!
//! A compressed buffer states its uncompressed length in its first 8 bytes, and arrow-ipc
//! allocates that much at once: a damaged length (2^44, say) makes the allocation fail,
//! which aborts the process rather than returning an error. So every record batch and
//! dictionary batch the reader will decode (a stream's messages in order, a file's blocks
//! as its footer lists them) has its buffers' lengths checked: a batch's together, and
//! the dictionaries' (which the reader keeps) added up, against the memory left.

use arrow_ipc::{Message, root_as_footer, root_as_message};
use std::io::{Read, Seek, SeekFrom};

/// The marker before a message's length (the legacy format has none).
const CONTINUATION: [u8; 4] = [0xff; 4];

/// Checks the compressed buffers of the IPC stream or file (`stream`) of `len` bytes in
/// `r`: none may claim more than `limit` bytes uncompressed. What is not an IPC layout
/// this check can follow is left for the reader to refuse.
pub(super) fn check(r: &mut (impl Read + Seek), len: u64, stream: bool, limit: u64) -> Result<(), String> {
    let mut dictionaries = 0;
    if stream {
        let mut at = 0;
        while let Some((meta, body_at)) = message_at(r, at, len)? {
            let msg = parsed(&meta, at)?;
            let body = body_len(&msg, body_at, len, at)?;
            buffers(r, &msg, body_at, body, limit, &mut dictionaries)?;
            at = body_at + body;
        }
        return Ok(());
    }
    // A file: magic, messages, footer, its length (4 bytes) and the magic (6). Without
    // the closing magic it is no IPC file: the reader says so.
    if len < 10 || read_at::<6>(r, len - 6)? != *b"ARROW1" {
        return Ok(());
    }
    let footer_len = u64::from(u32::from_le_bytes(read_at::<4>(r, len - 10)?));
    if footer_len > len - 10 {
        return Err(format!("the footer claims {footer_len} bytes, past the file's start"));
    }
    let mut footer = vec![0; footer_len as usize];
    r.seek(SeekFrom::Start(len - 10 - footer_len)).map_err(|e| e.to_string())?;
    r.read_exact(&mut footer).map_err(|e| e.to_string())?;
    let footer = root_as_footer(&footer).map_err(|e| format!("the footer: {e}"))?;
    let blocks = footer.recordBatches().into_iter().flatten().chain(footer.dictionaries().into_iter().flatten());
    for b in blocks {
        let (Ok(at), Ok(meta_len), Ok(body)) =
            (u64::try_from(b.offset()), u64::try_from(b.metaDataLength()), u64::try_from(b.bodyLength()))
        else {
            return Err("a block of the footer has a negative offset or length".into());
        };
        let body_at = at.checked_add(meta_len).filter(|&e| e.checked_add(body).is_some_and(|end| end <= len));
        let Some(body_at) = body_at else { return Err(format!("the block at byte {at} lies past the file's end")) };
        let Some((meta, _)) = message_at(r, at, body_at)? else {
            return Err(format!("the block at byte {at} holds no message"));
        };
        buffers(r, &parsed(&meta, at)?, body_at, body, limit, &mut dictionaries)?;
    }
    Ok(())
}

/// The message whose length prefix is at byte `at` (its metadata bytes and where its
/// body starts), reading no further than `end`; `None` at the end of the stream.
fn message_at(r: &mut (impl Read + Seek), at: u64, end: u64) -> Result<Option<(Vec<u8>, u64)>, String> {
    if at + 4 > end {
        return Ok(None);
    }
    let mut prefix = read_at::<4>(r, at)?;
    let mut meta_at = at + 4;
    if prefix == CONTINUATION {
        if meta_at + 4 > end {
            return Ok(None);
        }
        prefix = read_at::<4>(r, meta_at)?;
        meta_at += 4;
    }
    let meta_len = i32::from_le_bytes(prefix);
    if meta_len == 0 {
        return Ok(None);
    }
    let Ok(meta_len) = u64::try_from(meta_len) else {
        return Err(format!("the message at byte {at} has a negative length"));
    };
    if meta_len > end - meta_at {
        return Err(format!("the message at byte {at} claims {meta_len} bytes, past the end"));
    }
    let mut meta = vec![0; meta_len as usize];
    r.read_exact(&mut meta).map_err(|e| e.to_string())?;
    Ok(Some((meta, meta_at + meta_len)))
}

fn parsed(meta: &[u8], at: u64) -> Result<Message<'_>, String> {
    root_as_message(meta).map_err(|e| format!("the message at byte {at}: {e}"))
}

/// A stream message's body length, checked to lie within the `len` bytes.
fn body_len(msg: &Message<'_>, body_at: u64, len: u64, at: u64) -> Result<u64, String> {
    u64::try_from(msg.bodyLength())
        .ok()
        .filter(|&b| b <= len - body_at)
        .ok_or_else(|| format!("the message at byte {at} has a body past the end"))
}

/// Checks the compressed buffers of a record or dictionary batch whose body of `body`
/// bytes starts at `body_at`: together, with the `dictionaries` read before for a
/// dictionary batch (which adds its own), no more than `limit` bytes uncompressed.
fn buffers(
    r: &mut (impl Read + Seek),
    msg: &Message<'_>,
    body_at: u64,
    body: u64,
    limit: u64,
    dictionaries: &mut u64,
) -> Result<(), String> {
    let dictionary = msg.header_as_dictionary_batch();
    let batch = msg.header_as_record_batch().or_else(|| dictionary.and_then(|d| d.data()));
    let Some(batch) = batch.filter(|b| b.compression().is_some()) else { return Ok(()) };
    let mut total = if dictionary.is_some() { *dictionaries } else { 0 };
    for b in batch.buffers().into_iter().flatten() {
        // An empty buffer has no length prefix.
        if b.length() == 0 {
            continue;
        }
        let start = u64::try_from(b.offset()).ok().filter(|&o| o.checked_add(8).is_some_and(|e| e <= body));
        let Some(start) = start else {
            return Err(format!("a buffer of the batch at byte {body_at} lies past its body"));
        };
        let claimed = i64::from_le_bytes(read_at::<8>(r, body_at + start)?);
        // -1 marks a buffer stored uncompressed.
        total = total.saturating_add(u64::try_from(claimed).unwrap_or(0));
        if total > limit {
            return Err(format!(
                "the compressed buffers of the batch at byte {body_at} claim {total} bytes uncompressed, more than the {limit} bytes of memory left"
            ));
        }
    }
    if dictionary.is_some() {
        *dictionaries = total;
    }
    Ok(())
}

fn read_at<const N: usize>(r: &mut (impl Read + Seek), at: u64) -> Result<[u8; N], String> {
    let mut b = [0; N];
    r.seek(SeekFrom::Start(at)).map_err(|e| e.to_string())?;
    r.read_exact(&mut b).map_err(|e| e.to_string())?;
    Ok(b)
}
