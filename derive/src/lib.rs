//! `#[derive(ChildMessage)]`: a child's message type whose fields are any serde types, able to
//! cross nodes through the hub without making the child a remotable actor.
//!
//! ractor_cluster advertises every actor whose message type says it is serializable to every
//! connected node, and each node then builds a proxy actor for it (about 12 KB each, eagerly,
//! for every child on every other node). A hub reaches its children by id instead, so it needs
//! an encoding but not the advertisement. This derive implements `ractor::Message` for the enum
//! it decorates with `serialize` / `deserialize` of its own while `serializable()` stays
//! `false`:
//! - a variant travels as ractor's `SerializedMessage`: its name, and its fields encoded one
//!   after the other with serde in the hub's codec (bincode, fixed-width little-endian
//!   integers: the bytes of `bincode::serialize` of the tuple of the fields);
//! - every field, and the answer `T` of an `#[rpc]` variant's one `RpcReplyPort<T>`, may be any
//!   type that is `serde::Serialize + serde::de::DeserializeOwned + Send + 'static`: structs,
//!   `Vec`s, maps, `Option`s. A field of another type is a compile error at that field;
//! - bytes that do not decode as the variant (another variant's, truncated, trailing bytes, a
//!   forged length) are an error, never a default value: the hub answers the caller `decode`.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, GenericArgument, PathArguments, Type};

/// Implements `ractor::Message` for a child's message enum: local sends as usual, and the hub's
/// serde encoding for `ChildRef` messages between nodes, without advertising the child to other
/// nodes (see the crate docs). Fields are any serde types; mark request variants `#[rpc]`, each
/// with exactly one `RpcReplyPort<T>` field (`T` a serde type too).
#[proc_macro_derive(ChildMessage, attributes(rpc))]
pub fn child_message(input: TokenStream) -> TokenStream {
    let ast = match syn::parse::<DeriveInput>(input) {
        Ok(ast) => ast,
        Err(e) => return e.to_compile_error().into(),
    };
    match expand(&ast) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// One field of a variant: its binding, its codec, and whether it is the reply port.
struct Field {
    bind: syn::Ident,
    /// The constant holding the codec of the field's type (of the answer for a reply port).
    codec: syn::Ident,
    /// `Some(T)` for the `RpcReplyPort<T>` of an `#[rpc]` variant.
    answer: Option<Type>,
    /// The field's name (named fields), for the constructor.
    name: Option<syn::Ident>,
}

/// The `T` of a type whose last path segment is `RpcReplyPort<T>`.
fn reply_port_answer(ty: &Type) -> Option<syn::Result<Type>> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "RpcReplyPort" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Some(Err(syn::Error::new_spanned(
            ty,
            "ChildMessage: RpcReplyPort needs its answer type: RpcReplyPort<T>",
        )));
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) if args.args.len() == 1 => Some(Ok(t.clone())),
        _ => Some(Err(syn::Error::new_spanned(
            ty,
            "ChildMessage: RpcReplyPort takes one answer type: RpcReplyPort<T>",
        ))),
    }
}

fn expand(ast: &DeriveInput) -> syn::Result<TokenStream2> {
    let Data::Enum(data) = &ast.data else {
        return Err(syn::Error::new_spanned(
            &ast.ident,
            "ChildMessage: only enums (like RactorClusterMessage)",
        ));
    };
    if !ast.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &ast.generics,
            "ChildMessage: generic message types are not supported",
        ));
    }
    let name = &ast.ident;
    let p = quote! { ::process_hub::__private };
    let r = quote! { ::process_hub::__private::ractor };
    let mut serialize_arms = Vec::new();
    let mut cast_arms = Vec::new();
    let mut call_arms = Vec::new();
    // One codec constant per field and per answer, spanned at its type: the one place a type
    // that is not a serde type is reported.
    let mut codecs = Vec::new();
    for (vi, v) in data.variants.iter().enumerate() {
        let ident = &v.ident;
        let tag = ident.to_string();
        let rpc_attrs: Vec<_> = v
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("rpc"))
            .collect();
        if rpc_attrs.len() > 1 {
            return Err(syn::Error::new_spanned(
                rpc_attrs[1],
                "ChildMessage: #[rpc] twice",
            ));
        }
        for a in &rpc_attrs {
            if !matches!(a.meta, syn::Meta::Path(_)) {
                return Err(syn::Error::new_spanned(
                    a,
                    "ChildMessage: #[rpc] takes no arguments",
                ));
            }
        }
        let rpc = !rpc_attrs.is_empty();
        let mut fields = Vec::new();
        for (i, f) in v.fields.iter().enumerate() {
            let answer = match reply_port_answer(&f.ty) {
                Some(Ok(t)) => Some(t),
                Some(Err(e)) => return Err(e),
                None => None,
            };
            if answer.is_some() && !rpc {
                return Err(syn::Error::new_spanned(
                    &f.ty,
                    "ChildMessage: a variant with an RpcReplyPort field must be marked #[rpc]",
                ));
            }
            let codec = format_ident!("__PROCESS_HUB_CODEC_{}_{}", vi, i);
            let codec_ty = answer.as_ref().unwrap_or(&f.ty);
            codecs.push(quote_spanned! {codec_ty.span()=>
                const #codec: #p::FieldCodec<#codec_ty> = #p::codec::<#codec_ty>();
            });
            fields.push(Field {
                codec,
                bind: format_ident!("__f{}", i),
                answer,
                name: f.ident.clone(),
            });
        }
        let ports = fields.iter().filter(|f| f.answer.is_some()).count();
        if rpc && ports != 1 {
            return Err(syn::Error::new(
                v.span(),
                "ChildMessage: an #[rpc] variant has exactly one RpcReplyPort<T> field",
            ));
        }
        // The pattern that binds every field, and the expression that builds the variant from
        // the same bindings.
        let binds: Vec<_> = fields.iter().map(|f| &f.bind).collect();
        let pattern = match &v.fields {
            Fields::Unit => quote! { #name::#ident },
            Fields::Unnamed(_) => quote! { #name::#ident(#(#binds),*) },
            Fields::Named(_) => {
                let names: Vec<_> = fields.iter().map(|f| &f.name).collect();
                quote! { #name::#ident { #(#names: #binds),* } }
            }
        };
        let data: Vec<_> = fields.iter().filter(|f| f.answer.is_none()).collect();
        let pushes = data.iter().map(|f| {
            let (bind, codec) = (&f.bind, &f.codec);
            quote! { __encoder.push(#codec, &#bind)?; }
        });
        let reads = data.iter().map(|f| {
            let (bind, codec) = (&f.bind, &f.codec);
            quote! { let #bind = __decoder.next(#codec)?; }
        });
        let (encode, decode) = if data.is_empty() {
            let encode = quote! { let __args = ::std::vec::Vec::new(); };
            let decode = quote! {
                if !__args.is_empty() {
                    return ::core::result::Result::Err(#r::message::BoxedDowncastErr);
                }
            };
            (encode, decode)
        } else {
            let encode = quote! {
                let mut __encoder = #p::Encoder::new();
                #(#pushes)*
                let __args = __encoder.finish();
            };
            let decode = quote! {
                let mut __decoder = #p::Decoder::new(&__args);
                #(#reads)*
                __decoder.finish()?;
            };
            (encode, decode)
        };
        match fields.iter().find(|f| f.answer.is_some()) {
            None => {
                serialize_arms.push(quote! {
                    #pattern => {
                        #encode
                        ::core::result::Result::Ok(#r::message::SerializedMessage::Cast {
                            variant: ::std::string::String::from(#tag),
                            args: __args,
                            metadata: ::core::option::Option::None,
                        })
                    }
                });
                cast_arms.push(quote! {
                    #tag => {
                        #decode
                        ::core::result::Result::Ok(#pattern)
                    }
                });
            }
            Some(port) => {
                let (bind, codec) = (&port.bind, &port.codec);
                let to_bytes = quote! { #p::reply_bytes(#bind, #codec)? };
                let to_typed = quote! { #p::reply_typed(__reply, #codec)? };
                serialize_arms.push(quote! {
                    #pattern => {
                        #encode
                        ::core::result::Result::Ok(#r::message::SerializedMessage::Call {
                            variant: ::std::string::String::from(#tag),
                            args: __args,
                            reply: #to_bytes,
                            metadata: ::core::option::Option::None,
                        })
                    }
                });
                call_arms.push(quote! {
                    #tag => {
                        #decode
                        let #bind = #to_typed;
                        ::core::result::Result::Ok(#pattern)
                    }
                });
            }
        }
    }
    let no_casts = cast_arms.is_empty().then(|| quote! { let _ = &__args; });
    let no_calls = call_arms
        .is_empty()
        .then(|| quote! { let _ = (&__args, __reply); });
    Ok(quote! {
        #[allow(non_upper_case_globals)]
        const _: () = {
        #(#codecs)*

        impl #r::Message for #name {
            // `serializable()` keeps its default, `false`: ractor_cluster does not advertise
            // the child to other nodes. The hub calls these two directly.
            fn serialize(
                self,
            ) -> ::core::result::Result<
                #r::message::SerializedMessage,
                #r::message::BoxedDowncastErr,
            > {
                match self {
                    #(#serialize_arms)*
                }
            }

            fn deserialize(
                message: #r::message::SerializedMessage,
            ) -> ::core::result::Result<Self, #r::message::BoxedDowncastErr> {
                match message {
                    #r::message::SerializedMessage::Cast { variant, args: __args, .. } => {
                        #no_casts
                        match variant.as_str() {
                            #(#cast_arms)*
                            _ => ::core::result::Result::Err(#r::message::BoxedDowncastErr),
                        }
                    }
                    #r::message::SerializedMessage::Call {
                        variant, args: __args, reply: __reply, ..
                    } => {
                        #no_calls
                        match variant.as_str() {
                            #(#call_arms)*
                            _ => ::core::result::Result::Err(#r::message::BoxedDowncastErr),
                        }
                    }
                    _ => ::core::result::Result::Err(#r::message::BoxedDowncastErr),
                }
            }
        }
        };
    })
}
