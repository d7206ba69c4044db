//! `#[derive(ChildMessage)]`: a child's message type that crosses nodes through the hub with
//! ractor_cluster's own encoding, without making the child a remotable actor.
//!
//! ractor_cluster advertises every actor whose message type says it is serializable to every
//! connected node, and each node then builds a proxy actor for it (about 12 KB each, eagerly,
//! for every child on every other node). A hub reaches its children by id instead, so it needs
//! the encoding but not the advertisement. This derive writes, for the enum it decorates, a
//! hidden twin enum with the same variants deriving `RactorClusterMessage` (so the bytes are
//! exactly ractor_cluster's: the variant's name and its `BytesConvertable` fields, `#[rpc]`
//! variants with one `RpcReplyPort<T>`), and implements `ractor::Message` for the enum with
//! `serialize` / `deserialize` going through the twin while `serializable()` stays `false`.
//! The rules of fields are ractor_cluster's; an enum deriving `RactorClusterMessage` becomes a
//! `ChildMessage` by changing only the derive's name.

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields};

/// Implements `ractor::Message` for a child's message enum: local sends as usual, and
/// ractor_cluster's encoding for `ChildRef` messages between nodes, without advertising the
/// child to other nodes (see the crate docs). Mark request variants `#[rpc]`.
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

fn expand(ast: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
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
    let twin = format_ident!("__ProcessHubWire{}", name);
    let mut twin_variants = Vec::new();
    let mut to_twin = Vec::new();
    let mut from_twin = Vec::new();
    for v in &data.variants {
        let ident = &v.ident;
        let rpc: Vec<_> = v
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("rpc"))
            .collect();
        let fields = &v.fields;
        twin_variants.push(quote! { #(#rpc)* #ident #fields });
        match fields {
            Fields::Unit => {
                to_twin.push(quote! { #name::#ident => #twin::#ident });
                from_twin.push(quote! { #twin::#ident => #name::#ident });
            }
            Fields::Unnamed(f) => {
                let binds: Vec<_> = (0..f.unnamed.len())
                    .map(|i| format_ident!("__f{}", i))
                    .collect();
                to_twin.push(quote! { #name::#ident(#(#binds),*) => #twin::#ident(#(#binds),*) });
                from_twin.push(quote! { #twin::#ident(#(#binds),*) => #name::#ident(#(#binds),*) });
            }
            Fields::Named(f) => {
                let binds: Vec<_> = f.named.iter().filter_map(|f| f.ident.clone()).collect();
                to_twin.push(
                    quote! { #name::#ident { #(#binds),* } => #twin::#ident { #(#binds),* } },
                );
                from_twin.push(
                    quote! { #twin::#ident { #(#binds),* } => #name::#ident { #(#binds),* } },
                );
            }
        }
    }
    Ok(quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, clippy::enum_variant_names)]
        #[derive(::process_hub::__private::RactorClusterMessage)]
        enum #twin {
            #(#twin_variants),*
        }

        impl ::ractor::Message for #name {
            // `serializable()` keeps its default, `false`: ractor_cluster does not advertise
            // the child to other nodes. The hub calls these two directly.
            fn serialize(
                self,
            ) -> ::core::result::Result<
                ::ractor::message::SerializedMessage,
                ::ractor::message::BoxedDowncastErr,
            > {
                let twin = match self {
                    #(#to_twin),*
                };
                <#twin as ::ractor::Message>::serialize(twin)
            }

            fn deserialize(
                message: ::ractor::message::SerializedMessage,
            ) -> ::core::result::Result<Self, ::ractor::message::BoxedDowncastErr> {
                let twin = <#twin as ::ractor::Message>::deserialize(message)?;
                ::core::result::Result::Ok(match twin {
                    #(#from_twin),*
                })
            }
        }
    })
}
